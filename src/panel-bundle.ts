// The panel's esbuild options and its index.html: the hashed asset names are read from the build's
// metafile, so a new build gets new names (cached for a year) and index.html (revalidated) points at them.

import type { BuildOptions, Metafile } from 'esbuild'
import { createHash } from 'node:crypto'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'

/** Relative to the package root (esbuild's absWorkingDir). */
export const PANEL_OUT = 'dist/web/panel'

export const PANEL_BUNDLE: BuildOptions = {
  entryPoints: ['src/panel/main.tsx'],
  outdir: `${PANEL_OUT}/assets`,
  entryNames: 'app-[hash]',
  assetNames: 'asset-[hash]',
  format: 'esm',
  target: 'es2022',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  tsconfig: 'src/panel/tsconfig.json',
  metafile: true,
  legalComments: 'none',
}

/** Empty the output folder first: assets of earlier builds would otherwise be served forever. */
export function cleanPanel (root: string): void {
  rmSync(`${root}${PANEL_OUT}`, { recursive: true, force: true })
  mkdirSync(`${root}${PANEL_OUT}`, { recursive: true })
}

/** The tab's icon (a beacon's light on the panel's accent colour): linked from index.html, so no browser asks for /favicon.ico. */
export const PANEL_ICON = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1d4ed8"/>' +
  '<circle cx="16" cy="16" r="5" fill="#fff"/><circle cx="16" cy="16" r="10" fill="none" stroke="#fff" stroke-width="2" opacity=".6"/></svg>\n'

/** index.html naming the entry's script, stylesheet and icon; no inline script (the page's CSP forbids it). */
export function writePanelIndex (root: string, metafile: Metafile): void {
  const outputs = Object.keys(metafile.outputs).map(path => path.slice(path.lastIndexOf('/') + 1))
  const script = outputs.find(name => /^app-[A-Z0-9]+\.js$/.test(name))
  const style = outputs.find(name => /^app-[A-Z0-9]+\.css$/.test(name))
  if (script === undefined || style === undefined) throw new Error(`panel build produced no app script or stylesheet: ${outputs.join(', ')}`)
  const icon = `icon-${createHash('sha256').update(PANEL_ICON).digest('hex').slice(0, 8).toUpperCase()}.svg`
  writeFileSync(`${root}${PANEL_OUT}/assets/${icon}`, PANEL_ICON)
  writeFileSync(`${root}${PANEL_OUT}/index.html`, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Beacon</title>
<link rel="icon" type="image/svg+xml" href="/panel/assets/${icon}">
<link rel="stylesheet" href="/panel/assets/${style}">
<script type="module" src="/panel/assets/${script}"></script>
</head>
<body><div id="app"></div></body>
</html>
`)
}
