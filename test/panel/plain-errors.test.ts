import { expect } from 'chai'
import { plainErrors, plainField, plainMessage } from '../../src/panel/plain-errors.js'

describe('panel errors in plain words', () => {
  it('names a field by its label, never by its JSON pointer', () => {
    expect(plainField('/trigger/events/0')).to.equal('Trigger event #1')
    expect(plainField('/frequencyCap/max')).to.equal('Frequency cap at most')
    expect(plainField('/delivery/timeoutMs')).to.equal('Delivery timeout (ms)')
    expect(plainField('/rule/all/1/op')).to.equal('Condition part #2 operator')
    expect(plainField('/request/headers/X-Source')).to.equal('Request headers X-Source')
  })

  it('leaves the API call out of a message, and says where to define an event type', () => {
    const unknown = {
      code: 'unknown_event_type', field: '/trigger/events/0',
      message: 'The event type "page view" is not built in and was not defined for this account: define it first (PUT /admin/accounts/{account}/event-types/page view).',
    }
    expect(plainErrors([unknown])).to.equal('Trigger event #1: The event type "page view" is not defined: add it on the Events page first.')
    expect(plainMessage({ message: 'Gone (GET /admin/accounts/x/campaigns) already.' })).to.equal('Gone already.')
  })

  it('drops the field name the message starts with (the label says it), and joins several', () => {
    const text = plainErrors([
      { code: 'invalid_campaign', field: '/name', message: 'name must not be empty' },
      { code: 'invalid_field', field: '/delivery/timeoutMs', message: 'delivery/timeoutMs is required.' },
      { code: 'invalid_campaign', field: '/frequencyCap/max', message: 'max must be an integer from 1 to 1000' },
      { code: 'conflict', message: 'The id is taken.' },
    ])
    expect(text).to.equal('Name: Must not be empty; Delivery timeout (ms): Is required.; Frequency cap at most: Must be an integer from 1 to 1000; The id is taken.')
    expect(text).to.not.match(/\/[a-z]+\//)
  })
})
