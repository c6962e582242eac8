// What a new panel password and email must not be (issue 27): a password of only spaces, or one of the
// most common passwords long enough to pass the length rule (a small built-in list, compared without
// case or spaces); an email with an invisible character (zero-width, bidi controls, soft hyphen, any
// Unicode format or control character), which can pass for another user's address on screen.

import { ApiError } from '../errors.js'

/** Common passwords of 12 characters or more (from public breach lists), lower case, without spaces. */
const COMMON = new Set([
  '123456789012', '1234567890123', '12345678901234', '123456789000', '098765432112', '111111111111',
  '000000000000', '123123123123', '121212121212', '112233445566', 'aaaaaaaaaaaa', 'abcdefghijkl',
  'abc123abc123', 'qwertyuiop12', 'qwertyuiopas', 'qwertyqwerty', 'qwerty123456', '123456qwerty',
  'qwerty12345678', '1q2w3e4r5t6y', '1qaz2wsx3edc', 'qazwsxedcrfv', 'zaq12wsxcde3', 'asdfghjkl123',
  'asdfasdfasdf', 'password1234', 'password12345', 'password123!', 'password2024', 'password2025',
  'password2026', 'passwordpassword', 'passw0rd1234', 'p@ssw0rd1234', 'p@ssword1234', 'letmein12345',
  'welcome12345', 'welcome123456', 'changeme1234', 'administrator', 'administrator1', 'adminadmin12',
  'admin1234567', 'iloveyou1234', 'trustno1trustno1', 'monkey123456', 'football1234', 'baseball1234',
  'superman1234', 'dragon123456', 'sunshine1234', 'princess1234', 'starwars1234', 'master123456',
  'qwerty1234567890', '1234567890qwerty', 'mypassword123', 'secretpassword', 'supersecret123',
])

/** Unicode control, format (zero-width, bidi, BOM, soft hyphen), line and paragraph separators. */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/u

/** Refuses a password of only white space, or a common one (400 invalid_field at /password). */
export function assertPasswordAcceptable (password: string): void {
  if (password.trim() === '') throw new ApiError('invalid_field', 'The password must not be only spaces.', '/password')
  const folded = password.normalize('NFKC').toLowerCase().replace(/\s+/g, '')
  if (COMMON.has(folded) || /^(.)\1*$/u.test(folded)) throw new ApiError('invalid_field', 'The password is one of the most common ones; choose another.', '/password')
}

/** Refuses an email with an invisible character (400 invalid_field at /email). */
export function assertEmailVisible (email: string): void {
  if (INVISIBLE.test(email)) throw new ApiError('invalid_field', 'The email has an invisible character (zero-width, bidi control, …).', '/email')
}
