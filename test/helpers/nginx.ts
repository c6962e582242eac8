// A real nginx (Debian's /usr/sbin/nginx) as a reverse proxy in front of a Beacon: one process in the
// foreground (no daemon, no master), its own prefix, config, pid file, logs and temp folders in a temp
// dir, on a port picked free by the test.

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { once } from 'node:events'
import { removeDir, tempDir } from './beacon.js'
import { freePort } from './nats-server.js'

export const NGINX = '/usr/sbin/nginx'

export interface Nginx {
  url: string
  port: number
  /** The nginx process (its CPU, in benchmarks). */
  pid: number
  /** nginx's error log so far (what it said about refused requests or its upstream). */
  errors: () => string
  stop: () => Promise<void>
}

/** Start nginx proxying every path to `upstream` with the given `location /` directives. */
export function startNginx (upstream: string, locationDirectives: string): Promise<Nginx> {
  return startNginxWith(port => `
  upstream beacon {
    server ${upstream};
    keepalive 8;
  }
  server {
    listen 127.0.0.1:${port};
    server_name localhost;
    location / {
      proxy_pass http://beacon;
      ${locationDirectives}
    }
  }`)
}

/**
 * Start nginx with `http(port)` inside its http block: upstreams, maps and a server listening on
 * 127.0.0.1:port. `workerConnections`: clients and upstream connections together.
 */
export async function startNginxWith (http: (port: number) => string, workerConnections = 64): Promise<Nginx> {
  const prefix = tempDir('beacon-nginx-')
  mkdirSync(join(prefix, 'logs'))
  const port = await freePort()
  const errorLog = join(prefix, 'logs', 'error.log')
  const conf = join(prefix, 'nginx.conf')
  writeFileSync(conf, `
daemon off;
master_process off;
worker_processes 1;
pid ${join(prefix, 'nginx.pid')};
error_log ${errorLog} info;
events { worker_connections ${workerConnections}; }
http {
  access_log off;
  client_body_temp_path ${join(prefix, 'client_body')};
  proxy_temp_path ${join(prefix, 'proxy')};
  fastcgi_temp_path ${join(prefix, 'fastcgi')};
  uwsgi_temp_path ${join(prefix, 'uwsgi')};
  scgi_temp_path ${join(prefix, 'scgi')};
${http(port)}
}
`)
  const child: ChildProcess = spawn(NGINX, ['-p', prefix, '-c', conf, '-e', errorLog], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  const exited = once(child, 'exit')
  // Ready once it accepts connections.
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited:\n${output}\n${readLog(errorLog)}`)
    const ok = await new Promise<boolean>(resolve => {
      const socket = net.connect(port, '127.0.0.1', () => { socket.destroy(); resolve(true) })
      socket.on('error', () => resolve(false))
    })
    if (ok) break
    if (i === 200) throw new Error(`nginx did not listen:\n${output}\n${readLog(errorLog)}`)
    await new Promise(resolve => setTimeout(resolve, 25))
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    errors: () => readLog(errorLog),
    async stop () {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT')
      await exited
      removeDir(prefix)
    },
  }
}

function readLog (file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}

/** deploy/nginx-cluster.conf, the shipped route configuration for three nodes. */
export const CLUSTER_CONF = new URL('../../deploy/nginx-cluster.conf', import.meta.url).pathname

/**
 * deploy/nginx-cluster.conf as shipped, for three nodes running here: its addresses (beacon-N:8080)
 * replaced by theirs, its node ids (beacon-N) in the map by theirs, its listen port by `port`. Throws
 * when the file no longer has what is replaced (so a test never runs another configuration than shipped).
 */
export function clusterNginxConf (nodes: ReadonlyArray<{ id: string, address: string }>, port: number): string {
  if (nodes.length !== 3) throw new Error('deploy/nginx-cluster.conf is written for three nodes')
  let text = readFileSync(CLUSTER_CONF, 'utf8')
  const replace = (pattern: RegExp, expected: number, by: (...groups: string[]) => string): void => {
    let count = 0
    text = text.replace(pattern, (...match: string[]) => { count++; return by(...match) })
    if (count !== expected) throw new Error(`deploy/nginx-cluster.conf: ${count} matches of ${pattern}, expected ${expected}`)
  }
  replace(/\bbeacon-(\d):8080\b/g, 12, (_all, n) => nodes[Number(n) - 1]!.address)
  replace(/^(\s+)beacon-(\d)(\s+beacon_node_\d;)$/gm, 3, (_all, indent, n, rest) => `${indent}${nodes[Number(n) - 1]!.id}${rest}`)
  replace(/^(\s+)listen 8080;$/m, 1, (_all, indent) => `${indent}listen 127.0.0.1:${port};`)
  return text
}
