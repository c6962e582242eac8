import { expect } from 'chai'
import { compileTemplate, DEFAULT_PAYLOAD, jsonRenderProblem, TemplateError, type DeliveryItem } from '../../src/webhooks/index.js'
import { ACCOUNT } from './helpers.js'

const AT = Date.UTC(2025, 4, 6, 7, 8, 9, 10)

function itemWith (context: Partial<DeliveryItem['context']>): DeliveryItem {
  return { id: 'msg_1', occurredAtMs: AT, context: { account: ACCOUNT, ...context } }
}

describe('webhook templates', () => {
  describe('json mode', () => {
    it('renders a bare placeholder as a whole JSON value: strings quoted, numbers as is, absent as null', () => {
      const t = compileTemplate('{"p":{{profileId}},"total":{{event.orderTotal}},"items":{{event.items}},"v":{{visitorId}},"ts":{{timestamp}},"at":{{occurredAt}}}', 'json')
      const text = t.render(itemWith({ profileId: 'ann@example.com', eventFields: { orderTotal: 39.8, items: ['a', 'b'] } }))
      expect(text).to.equal('{"p":"ann@example.com","total":39.8,"items":["a","b"],"v":null,"ts":' + AT + ',"at":"2025-05-06T07:08:09.010Z"}')
    })

    it('escapes quotes, backslashes, newlines, unicode and </script> so the body parses back to the original', () => {
      const nasty = 'He said "hi" \\o/\nline2\t</script><script>alert(1)</script> & ü 😀 \u2028'
      const t = compileTemplate('{"p":{{profileId}},"in":"x {{profileId}} y"}', 'json')
      const text = t.render(itemWith({ profileId: nasty }))
      expect(text).not.to.include('</script>')
      expect(text).to.include('\\u003c/script\\u003e')
      expect(text).not.to.include('\u2028')
      expect(JSON.parse(text)).to.deep.equal({ p: nasty, in: `x ${nasty} y` })
    })

    it('renders a placeholder inside a string literal as escaped text without quotes, absent as nothing', () => {
      const t = compileTemplate('{"greeting":"Hello {{profileId}}!","count":"{{event.n}}","none":"[{{visitorId}}]"}', 'json')
      expect(JSON.parse(t.render(itemWith({ profileId: 'Ann "A"', eventFields: { n: 3 } })))).to.deep.equal({ greeting: 'Hello Ann "A"!', count: '3', none: '[]' })
    })

    it('reads event fields and attributes from own properties only', () => {
      const t = compileTemplate('[{{event.constructor}},{{attribute.plan}},{{attribute.toString}}]', 'json')
      expect(t.render(itemWith({ eventFields: {}, attributes: { plan: 'pro' } }))).to.equal('[null,"pro",null]')
    })

    it('reads attributes from the event\'s own attributes field when the context has none', () => {
      const t = compileTemplate('[{{attribute.plan}},{{attribute.toString}}]', 'json')
      expect(t.render(itemWith({ eventFields: { attributes: { plan: 'pro' } } }))).to.equal('["pro",null]')
      expect(t.render(itemWith({ eventFields: { attributes: ['pro'] } }))).to.equal('[null,null]')
      expect(t.render(itemWith({ eventFields: Object.create({ attributes: { plan: 'inherited' } }) as Record<string, unknown> }))).to.equal('[null,null]')
      expect(t.render(itemWith({ eventFields: { attributes: { plan: 'event' } }, attributes: { plan: 'own' } }))).to.equal('["own",null]')
    })

    it('has the seed sample shape as the default payload, with the account, who and the event\'s fields a receiver needs', () => {
      const t = compileTemplate(DEFAULT_PAYLOAD, 'json')
      const fields = { account: ACCOUNT, visitorId: 'v1', profileId: 'p1', profileIdSignature: 'ab'.repeat(32), event: 'purchase', platform: 'web', orderId: 'o-1', orderTotal: 39.8 }
      expect(JSON.parse(t.render(itemWith({ profileId: 'p1', visitorId: 'v1', event: 'purchase', eventFields: fields })))).to.deep.equal({
        profile: 'p1', audience: null, event: 'purchase', occurredAt: '2025-05-06T07:08:09.010Z',
        account: ACCOUNT, visitorId: 'v1', profileId: 'p1', fields: { platform: 'web', orderId: 'o-1', orderTotal: 39.8 },
      })
      // A schedule run of the account: nobody, no event fields.
      expect(JSON.parse(t.render(itemWith({})))).to.deep.include({ account: ACCOUNT, visitorId: null, profileId: null, fields: null })
    })

    it('renders {{fields}} as the event\'s own fields (without who, what and the identity proof); the object itself when none is to leave out', () => {
      const t = compileTemplate('{"f":{{fields}},"text":"{{fields}}"}', 'json')
      const own = { sku: 'SKU-1', price: 9 }
      expect(JSON.parse(t.render(itemWith({ eventFields: own })))).to.deep.equal({ f: own, text: JSON.stringify(own) })
      expect(JSON.parse(t.render(itemWith({ eventFields: { ...own, account: ACCOUNT, visitorId: 'v', event: 'productView' } }))).f).to.deep.equal(own)
      expect(JSON.parse(t.render(itemWith({})))).to.deep.equal({ f: null, text: '' })
      expect(compileTemplate('{{ fields }}', 'url').render(itemWith({ eventFields: { a: 1 } }))).to.equal(encodeURIComponent('{"a":1}'))
    })

    it('accepts "{{x}}" and {{x}} alike but refuses a template that cannot render valid JSON for every value', () => {
      expect(jsonRenderProblem(compileTemplate('{"a":"{{profileId}}","b":{{profileId}}}', 'json'), false)).to.equal(null)
      expect(jsonRenderProblem(compileTemplate('{"a":{{profileId}}x}', 'json'), false)).to.match(/does not render valid JSON/)
      expect(jsonRenderProblem(compileTemplate('{ {{event}}: 1 }', 'json'), false)).to.match(/does not render valid JSON/)
      expect(jsonRenderProblem(compileTemplate('{"a":-{{event.n}}}', 'json'), false)).to.match(/does not render valid JSON/)
      expect(jsonRenderProblem(compileTemplate('[{{profileId}}]', 'json'), true)).to.match(/must render a JSON object/)
    })

    it('refuses a placeholder right after a backslash inside a string', () => {
      expect(() => compileTemplate('{"a":"\\{{profileId}}"}', 'json')).to.throw(TemplateError).with.property('position', 7)
    })
  })

  describe('url mode', () => {
    it('URL-encodes & = ? # / space, non-ASCII and emoji, and renders absent values as nothing', () => {
      const t = compileTemplate('https://h.example/u/{{profileId}}?e={{event}}&v={{visitorId}}&n={{event.n}}', 'url')
      const url = t.render(itemWith({ profileId: 'a&b=c?d#e/f g', event: 'köp 😀', eventFields: { n: 1e21 } }))
      expect(url).to.equal('https://h.example/u/a%26b%3Dc%3Fd%23e%2Ff%20g?e=k%C3%B6p%20%F0%9F%98%80&v=&n=1e%2B21')
      expect(new URL(url).searchParams.get('e')).to.equal('köp 😀')
    })

    it('writes a lone surrogate as U+FFFD instead of throwing', () => {
      expect(compileTemplate('{{profileId}}', 'url').render(itemWith({ profileId: 'a\uD800b' }))).to.equal('a%EF%BF%BDb')
    })
  })

  describe('header mode', () => {
    it('strips CR, LF and other control characters and percent-encodes non-ASCII', () => {
      const t = compileTemplate('id={{profileId}}', 'header')
      expect(t.render(itemWith({ profileId: 'evil\r\nX-Injected: 1\u0000 ü' }))).to.equal('id=evilX-Injected: 1 %C3%BC')
    })

    it('treats the braces before the last two of a run as literal text', () => {
      expect(compileTemplate('{{{profileId}}}', 'header').render(itemWith({ profileId: 'p' }))).to.equal('{p}')
    })
  })

  describe('compile errors', () => {
    it('refuses an unknown placeholder with its position and name', () => {
      try {
        compileTemplate('{"a":1,"b":{{profile}}}', 'json')
        expect.fail('should throw')
      } catch (err) {
        expect(err).to.be.instanceOf(TemplateError)
        expect(err).to.include({ position: 11, placeholder: 'profile', code: 'webhook_invalid_template' })
        expect((err as Error).message).to.match(/Unknown placeholder \{\{profile\}\} at position 11/)
      }
    })

    it('refuses an unclosed placeholder and an empty one', () => {
      expect(() => compileTemplate('x {{profileId', 'json')).to.throw(TemplateError, /Unclosed placeholder at position 2/)
      expect(() => compileTemplate('{{}}', 'url')).to.throw(TemplateError, /Unknown placeholder/)
      expect(() => compileTemplate('{{event.}}', 'url')).to.throw(TemplateError, /Unknown placeholder/)
      expect(() => compileTemplate('{{segment.vip}}', 'url')).to.throw(TemplateError, /Unknown placeholder/)
    })

    it('accepts spaces inside the braces and every documented placeholder', () => {
      const t = compileTemplate('{{ profileId }}{{visitorId}}{{account}}{{event}}{{audience}}{{change}}{{timestamp}}{{occurredAt}}{{event.sku}}{{attribute.plan}}', 'header')
      expect(t.placeholders).to.have.length(10)
    })
  })
})
