import { expect } from 'chai'
import { AssertionError, assert } from '../../src/assert.js'

describe('assert', () => {
  it('passes a true condition and narrows its type', () => {
    const value: string | null = 'x' as string | null
    assert(value !== null, 'value is set')
    expect(value.length).to.equal(1)
  })

  it('throws an AssertionError with its message and context on a false one', () => {
    let caught: unknown
    try {
      assert(1 + 1 === 3, 'sum is three', { left: 1, right: 1 })
    } catch (error) {
      caught = error
    }
    expect(caught).to.be.instanceOf(AssertionError)
    expect((caught as AssertionError).message).to.equal('assertion failed: sum is three')
    expect((caught as AssertionError).context).to.deep.equal({ left: 1, right: 1 })
  })
})
