// The browser bundles Beacon serves (the SDK, the panel), built by esbuild from their TypeScript
// sources into dist/web at `npm run build`, after tsc. Each bundle's sources live in their own folder
// under src/ with their own tsconfig (DOM types, no Node), outside the server's compilation.

import { build, type BuildOptions } from 'esbuild'
import { cleanPanel, PANEL_BUNDLE, writePanelIndex } from './panel-bundle.js'

const ROOT = new URL('../../', import.meta.url).pathname

/** Output folder of every bundle, read by the routes that serve them. */
export const WEB_DIR = `${ROOT}dist/web/`

const BUNDLES: BuildOptions[] = [
  // The browser SDK (docs/sdk.md): a classic script defining the global Beacon, and an ES module.
  { entryPoints: ['src/sdk/global.ts'], outfile: `${WEB_DIR}sdk/beacon.js`, format: 'iife', target: 'es2020', platform: 'browser' },
  { entryPoints: ['src/sdk/beacon.ts'], outfile: `${WEB_DIR}sdk/beacon.mjs`, format: 'esm', target: 'es2020', platform: 'browser' },
  PANEL_BUNDLE,
]

cleanPanel(ROOT)
for (const options of BUNDLES) {
  const result = await build({ absWorkingDir: ROOT, bundle: true, minify: true, logLevel: 'warning', ...options })
  if (options === PANEL_BUNDLE) writePanelIndex(ROOT, result.metafile!)
}
