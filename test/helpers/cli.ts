// The built `beacon` command, run as a user would, with only the environment given (plus PATH).

import { spawn } from 'node:child_process'

export const CLI = new URL('../../dist/src/cli.js', import.meta.url).pathname

export interface Run { code: number | null, stdout: string, stderr: string }

export function beacon (args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
    child.once('error', reject)
    child.once('exit', code => resolve({ code, stdout, stderr }))
  })
}
