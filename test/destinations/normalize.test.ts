// Normalization and hashing against the providers' published examples (docs/destinations.md names
// each page): the digest of the normalized value must be the provider's.

import { expect } from 'chai'
import { normalizeEmail, normalizeExternalId, normalizePhoneDigits, normalizePhoneE164, sha256Hex } from '../../src/destinations/normalize.js'

describe('destination identifiers: normalization and SHA-256', () => {
  describe("Meta's customer information parameters", () => {
    it('hashes the email example John_Smith@gmail.com to Meta\'s digest', () => {
      const email = normalizeEmail('  John_Smith@gmail.com ')
      expect(email).to.equal('john_smith@gmail.com')
      expect(sha256Hex(email!)).to.equal('62a14e44f765419d10fea99367361a727c12365e2520f32218d505ed9aa0f62f')
    })

    it('hashes the US phone example +1 (650) 555-1212 as digits with the country code', () => {
      const phone = normalizePhoneDigits('+1 (650) 555-1212')
      expect(phone).to.equal('16505551212')
      expect(sha256Hex(phone!)).to.equal('e323ec626319ca94ee8bff2e4c87cf613be6ea19919ed1364124e16807ab3176')
    })
  })

  describe("TikTok's customer file formats", () => {
    it('hashes the email example janedoe@gmail.com to TikTok\'s digest', () => {
      expect(sha256Hex(normalizeEmail('JaneDoe@Gmail.com')!)).to.equal('d6117306485ed0e50afab3ac871e98f81699151f30281527d63ff5f233656c69')
    })

    it('keeps the + of an E.164 phone', () => {
      expect(normalizePhoneE164('+1 657 777 0000')).to.equal('+16577770000')
      expect(normalizePhoneE164('+374 93 828222')).to.equal('+37493828222')
    })
  })

  describe('Google Ads Customer Match', () => {
    it('formats phones in E.164 with the country code and trims and lower-cases emails', () => {
      expect(normalizePhoneE164('+44 844 412 4653')).to.equal('+448444124653')
      expect(normalizeEmail(' Person@Example.COM ')).to.equal('person@example.com')
      expect(sha256Hex('person@example.com')).to.equal('542d240129883c019e106e3b1b2d3f3cb3537c43c425364de8e951d5a3083345')
    })
  })

  describe('phones', () => {
    it('reads an international 00 prefix as +', () => {
      expect(normalizePhoneDigits('0044 844 412 4653')).to.equal('448444124653')
    })

    it('gives a national number (leading 0) the configured country code, and skips it without one', () => {
      expect(normalizePhoneDigits('0844 412 4653', '44')).to.equal('448444124653')
      expect(normalizePhoneDigits('0844 412 4653')).to.equal(null)
    })

    it('refuses what cannot be a phone number', () => {
      expect(normalizePhoneDigits('12')).to.equal(null)
      expect(normalizePhoneDigits('+1234567890123456')).to.equal(null)
      expect(normalizePhoneDigits('')).to.equal(null)
      expect(normalizePhoneDigits({})).to.equal(null)
    })
  })

  describe('emails and external ids', () => {
    it('refuses what cannot be an address', () => {
      for (const bad of ['', 'no-at', '@example.com', 'user@', 'a b@example.com', 42, null]) expect(normalizeEmail(bad), String(bad)).to.equal(null)
    })

    it('trims and lower-cases an external id, numbers included', () => {
      expect(normalizeExternalId(' User-42 ')).to.equal('user-42')
      expect(normalizeExternalId(42)).to.equal('42')
      expect(normalizeExternalId('  ')).to.equal(null)
    })
  })
})
