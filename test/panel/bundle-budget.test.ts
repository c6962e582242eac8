import { expect } from 'chai'
import { readFileSync, readdirSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { PANEL_DIR } from '../../src/http/panel-routes.js'

/** The panel's budget: everything a first visit downloads, gzipped. */
const BUDGET_BYTES = 150 * 1024

describe('panel bundle budget', () => {
  it(`keeps the built panel (index, script, stylesheet) within ${BUDGET_BYTES / 1024} KB gzipped`, () => {
    const dir = PANEL_DIR
    const files = ['index.html', ...readdirSync(`${dir}assets`).map(name => `assets/${name}`)]
    expect(files.some(name => name.endsWith('.js'))).to.equal(true)
    const gzipped = files.reduce((sum, name) => sum + gzipSync(readFileSync(dir + name), { level: 9 }).length, 0)
    expect(gzipped).to.be.at.most(BUDGET_BYTES)
  })
})
