// The one assertion of an error answer: the API answers `{ errors: [{ code, field?, message }] }` with
// the status its code has in the one table of src/errors.ts. Tests assert codes, never message text.

import { expect } from 'chai'
import { ERRORS, type ErrorCode } from '../../src/errors.js'

export function expectError (answer: { status: number, body: any }, code: ErrorCode, field?: string): void {
  const seen = JSON.stringify(answer.body)
  expect(answer.body?.errors?.[0], seen).to.deep.include(field === undefined ? { code } : { code, field })
  expect(answer.status, `the status of ${code}: ${seen}`).to.equal(ERRORS[code][0])
}
