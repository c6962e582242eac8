import { expect } from 'chai'
import { decodeRest } from '../../src/panel/route-path.js'

describe('panel routes: the part after the section', () => {
  it('decodes percent-encoding, and answers null for a malformed one instead of throwing (issue 27)', () => {
    expect(decodeRest('shoe%20banner')).to.equal('shoe banner')
    expect(decodeRest('')).to.equal('')
    expect(decodeRest('caf%C3%A9')).to.equal('café')
    for (const bad of ['%E0%A4%A', '%', '%zz', 'a%E0%A4']) expect(decodeRest(bad), bad).to.equal(null)
  })
})
