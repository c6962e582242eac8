import { expect } from 'chai'
import { fieldsExcept } from '../../src/fields-except.js'

describe('fieldsExcept', () => {
  it('copies every own field but the excluded ones, as object rest does, into a new object or the one given', () => {
    const source = { account: 'a', event: 'pageView', token: 't', path: '/x', price: undefined }
    const excluded = new Set(['token', 'account'])
    const { token: _token, account: _account, ...rest } = source
    expect(fieldsExcept(source, excluded)).to.deep.equal(rest)
    expect(Object.keys(fieldsExcept(source, excluded))).to.deep.equal(['event', 'path', 'price'])
    const into: Record<string, unknown> = { first: 1 }
    expect(fieldsExcept(source, excluded, into)).to.equal(into)
    expect(into).to.deep.equal({ first: 1, event: 'pageView', path: '/x', price: undefined })
    expect(source).to.have.property('token', 't')
  })

  it('takes no inherited field', () => {
    const source = Object.assign(Object.create({ inherited: true }) as object, { own: 1 })
    expect(fieldsExcept(source, new Set())).to.deep.equal({ own: 1 })
  })
})
