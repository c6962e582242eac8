// The panel's esbuild options and its index.html: the hashed asset names are read from the build's
// metafile, so a new build gets new names (cached for a year) and index.html (revalidated) points at them.

import type { BuildOptions, Metafile } from 'esbuild'
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

/** index.html naming the entry's script and stylesheet; no inline script (the page's CSP forbids it). */
export function writePanelIndex (root: string, metafile: Metafile): void {
  const outputs = Object.keys(metafile.outputs).map(path => path.slice(path.lastIndexOf('/') + 1))
  const script = outputs.find(name => /^app-[A-Z0-9]+\.js$/.test(name))
  const style = outputs.find(name => /^app-[A-Z0-9]+\.css$/.test(name))
  if (script === undefined || style === undefined) throw new Error(`panel build produced no app script or stylesheet: ${outputs.join(', ')}`)
  writeFileSync(`${root}${PANEL_OUT}/index.html`, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Beacon</title>
<link rel="stylesheet" href="/panel/assets/${style}">
<script type="module" src="/panel/assets/${script}"></script>
</head>
<body><div id="app"></div></body>
</html>
`)
}
