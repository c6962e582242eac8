// A real Beacon cluster for tests: a 3-server NATS JetStream cluster (test/helpers/nats-cluster.ts) and
// N Beacon processes (dist/src/main.js, as test/helpers/beacon.ts starts them) in cluster mode, each with
// its own data folder and port, BEACON_REPLICAS=3, a short lease and the same admin key. Nodes can be
// SIGKILLed, SIGTERMed and restarted on their data folder.
//
// One tenant (account and token) is created on an embedded Beacon (once per test process) whose data
// folder is then copied to every node's: every node knows the account and token from its start (the configuration bucket gets
// them from the first node, src/catalog/replicated-config.ts), and a test needs no admin call to begin. Each copy gets a node id of its own (the data folder's, which outbox records
// carry), and the nodes are named node-1, node-2... in the cluster (BEACON_NODE_ID). Every node gets the
// seed's secrets key as BEACON_SECRETS_KEY (cluster mode requires it).

import { cpSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startNatsCluster, type NatsCluster, type NatsClusterOptions } from './nats-cluster.js'
import { admin, createTenant, removeDir, startBeacon, tempDir, type BeaconProcess, type Tenant } from './beacon.js'
import { randomUUID } from 'node:crypto'
import { LOCK_FILE } from '../../src/store/data-lock.js'
import { NODE_ID_KEY, Store } from '../../src/store/store.js'
import { SECRETS_KEY_FILE } from '../../src/store/secrets.js'
import type { ClusterStatus } from '../../src/cluster/node.js'
import { partitionOf } from '../../src/cluster/partition.js'

export const CLUSTER_PARTITIONS = 64
export const CLUSTER_LEASE_MS = 1500

/** What GET /admin/cluster answers. */
export type ClusterAnswer = ClusterStatus

export interface ClusterMember {
  id: string
  dataDir: string
  /** The data folder's id (Store.nodeId): what its delivery ids start with. */
  folderId: string
  /** The running process, null while stopped. */
  process: BeaconProcess | null
  /** The URL of the running process (throws while stopped). */
  readonly url: string
}

export interface BeaconCluster {
  name: string
  nats: NatsCluster
  tenant: Tenant
  members: ClusterMember[]
  /** The environment a node of this cluster gets (extra settings over it). */
  env (id: string, extra?: Record<string, string>): Record<string, string>
  /** The running members. */
  live (): ClusterMember[]
  kill (index: number): Promise<void>
  /** SIGTERM; resolves with the exit code. */
  stop (index: number): Promise<number | null>
  /** Starts a stopped member again on its data folder. */
  restart (index: number): Promise<void>
  /**
   * Starts one more node on a fresh seeded folder, named `id`, or by its data folder's node id when
   * null (no BEACON_NODE_ID); resolves with its index in `members`.
   */
  add (id: string | null): Promise<number>
  status (member: ClusterMember): Promise<ClusterAnswer>
  /**
   * Resolves once every running member answers the same lease holders, all partitions held by running
   * members only, none more than its share, and each member owns (recovered) what it holds. Returns the
   * partition → owner id map. `excluding`: a running member left out (paused: it must hold nothing).
   */
  settled (options?: { timeoutMs?: number, excluding?: string }): Promise<Map<number, string>>
  /** A fresh data folder holding the tenant (for an extra node). */
  seededDir (): Promise<string>
  close (): Promise<void>
}

let clusters = 0

interface Seed {
  dir: string
  tenant: Tenant
  /** The key the seed generated, which sealed its secrets: every node's BEACON_SECRETS_KEY (cluster mode requires one). */
  secretsKey: string
}

let seed: Promise<Seed> | null = null
const SEED_PREFIX = 'beacon-cluster-seed-'

/**
 * The seeds of test processes that are gone: mocha stops its parallel workers without their `exit`
 * handlers, so a worker's seed is removed by the next process that makes one (its name holds its pid).
 */
function removeSeedsOfGoneProcesses (): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(SEED_PREFIX)) continue
    const pid = Number(name.slice(SEED_PREFIX.length).split('-')[0])
    if (!Number.isInteger(pid) || pid === process.pid || alive(pid)) continue
    rmSync(join(tmpdir(), name), { recursive: true, force: true })
  }
}

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * The seed folder, made once per test process (a Beacon start, a tenant and a stop: about a second of
 * CPU that every cluster of a file paid before) and removed when the process exits; each cluster's nodes
 * start on copies of it, each cluster with NATS servers of its own. A seed that failed is tried again.
 */
function seedOnce (): Promise<Seed> {
  if (seed !== null) return seed
  const made = (async (): Promise<Seed> => {
    removeSeedsOfGoneProcesses()
    const dir = tempDir(`${SEED_PREFIX}${process.pid}-`)
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
    const beacon = await startBeacon({ dataDir: dir })
    try {
      const tenant = await createTenant(beacon.url, 'Cluster test')
      return { dir, tenant, secretsKey: readFileSync(join(dir, SECRETS_KEY_FILE), 'utf8').trim().split('\n').join(',') }
    } finally {
      await beacon.stop()
    }
  })()
  seed = made
  made.catch(() => { if (seed === made) seed = null })
  return made
}

/** `natsOptions`: the NATS servers run a configuration file (then pass their credentials in `extraEnv`). */
export async function startBeaconCluster (count = 3, extraEnv: Record<string, string> = {}, natsOptions: NatsClusterOptions | null = null): Promise<BeaconCluster> {
  const name = `t${process.pid}x${++clusters}`
  const nats = await startNatsCluster(natsOptions)
  const dirs: string[] = []
  const folderIds = new Map<string, string>()
  const members: ClusterMember[] = []
  try {
    const { dir: template, tenant: seeded, secretsKey } = await seedOnce()
    const tenant = { ...seeded }
    const seededDir = async (): Promise<string> => {
      const dir = tempDir('beacon-cluster-node-')
      cpSync(template, dir, { recursive: true })
      rmSync(join(dir, LOCK_FILE), { force: true })
      const store = new Store({ path: dir, durability: 'committed' })
      const folderId = randomUUID()
      store.meta.putSync(NODE_ID_KEY, folderId)
      folderIds.set(dir, folderId)
      await store.close()
      dirs.push(dir)
      return dir
    }
    const env = (id: string, extra: Record<string, string> = {}): Record<string, string> => ({
      BEACON_CLUSTER: name,
      BEACON_NATS_URL: nats.urls.join(','),
      BEACON_NODE_ID: id,
      BEACON_REPLICAS: '3',
      BEACON_LEASE_MS: String(CLUSTER_LEASE_MS),
      BEACON_PARTITIONS: String(CLUSTER_PARTITIONS),
      BEACON_SECRETS_KEY: secretsKey,
      ...extraEnv,
      ...extra,
    })
    const member = (id: string, dataDir: string): ClusterMember => ({
      id, dataDir, folderId: folderIds.get(dataDir)!, process: null,
      get url () {
        if (this.process === null) throw new Error(`${this.id} is not running`)
        return this.process.url
      },
    })
    for (let i = 0; i < count; i++) members.push(member(`node-${i + 1}`, await seededDir()))
    // Together: each start waits for its own "beacon started" only; balancing evens them out. Every start
    // is awaited before a failure is thrown: with Promise.all the nodes still starting when one failed
    // were left running, unknown to the clean-up below (seen: nodes of failed before-all hooks alive an
    // hour later on the shared machine).
    const starts = await Promise.allSettled(members.map(async member => { member.process = await startBeacon({ dataDir: member.dataDir, env: env(member.id) }) }))
    const failed = starts.find(start => start.status === 'rejected')
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason

    const cluster: BeaconCluster = {
      name, nats, tenant, members, env, seededDir,
      live: () => members.filter(member => member.process !== null),
      async kill (index) {
        const member = members[index]!
        await member.process?.kill()
        member.process = null
      },
      async stop (index) {
        const member = members[index]!
        const code = await member.process?.stop() ?? null
        member.process = null
        return code
      },
      async restart (index) {
        const member = members[index]!
        if (member.process !== null) throw new Error(`${member.id} is running`)
        member.process = await startBeacon({ dataDir: member.dataDir, env: env(member.id) })
      },
      async add (id) {
        const added = member(id ?? '', await seededDir())
        const { BEACON_NODE_ID: _named, ...unnamed } = env(added.id)
        added.process = await startBeacon({ dataDir: added.dataDir, env: id === null ? unnamed : env(id) })
        members.push(added)
        if (id === null) added.id = (await cluster.status(added)).node
        return members.length - 1
      },
      async status (member) {
        const answer = await admin<ClusterAnswer>(member.url, 'GET', '/admin/cluster')
        if (answer.status !== 200) throw new Error(`GET /admin/cluster on ${member.id}: ${answer.status} ${JSON.stringify(answer.body)}`)
        return answer.body
      },
      async settled ({ timeoutMs = 60_000, excluding }: { timeoutMs?: number, excluding?: string } = {}) {
        const deadline = Date.now() + timeoutMs
        let last = ''
        for (;;) {
          const live = cluster.live().filter(member => member.id !== excluding)
          const answers = await Promise.all(live.map(member => cluster.status(member).catch((error: Error) => error)))
          const problem = settledProblem(live, answers)
          if (problem === null) return ownersOf(answers[0] as ClusterAnswer)
          // Every node's own view too: the first problem found may not name the node that causes it.
          last = `${problem} (${live.map((member, i) => `${member.id}: ${summaryOf(answers[i]!)}`).join('; ')})`
          if (Date.now() >= deadline) throw new Error(`the cluster did not settle within ${timeoutMs} ms: ${last}`)
          await new Promise(resolve => setTimeout(resolve, 50))
        }
      },
      async close () {
        await Promise.all(members.map(member => member.process?.kill()))
        await nats.close()
        for (const dir of dirs) removeDir(dir)
      },
    }
    return cluster
  } catch (error) {
    await Promise.all(members.map(member => member.process?.kill()))
    await nats.close()
    for (const dir of dirs) removeDir(dir)
    throw error
  }
}

/**
 * A node's takeovers from /metrics: beacon_cluster_takeovers_total (count) and the takeover histogram's
 * sum in seconds.
 */
export async function takeoversOf (member: ClusterMember): Promise<{ count: number, sum: number }> {
  const text = await (await fetch(`${member.url}/metrics`)).text()
  const count = Number(/^beacon_cluster_takeovers_total (\S+)/m.exec(text)?.[1] ?? 0)
  const sum = Number(/^beacon_cluster_takeover_seconds_sum (\S+)/m.exec(text)?.[1] ?? 0)
  return { count, sum }
}

/** Partition → the id of the node holding its lease, from one answer. */
export function ownersOf (answer: ClusterAnswer): Map<number, string> {
  const owners = new Map<number, string>()
  for (const node of answer.nodes) for (const partition of node.partitions) owners.set(partition, node.id)
  return owners
}

/** One node's answer in short: what it owns, the live members it sees and the partitions each holds. */
function summaryOf (answer: ClusterAnswer | Error): string {
  if (answer instanceof Error) return answer.message
  return `${answer.joined ? '' : 'not joined, '}owns ${answer.owned.length}, recovering ${answer.recovering.length}, sees ${answer.nodes.map(node => `${node.id} ${node.partitions.length}`).join(' ')}`
}

function settledProblem (live: ClusterMember[], answers: Array<ClusterAnswer | Error>): string | null {
  const ids = new Set(live.map(member => member.id))
  let reference: string | null = null
  for (const [index, answer] of answers.entries()) {
    const member = live[index]!
    if (answer instanceof Error) return answer.message
    if (!answer.joined) return `${member.id} has not joined`
    if (answer.unowned.length > 0) return `${member.id} sees ${answer.unowned.length} partitions without owner`
    if (answer.recovering.length > 0) return `${member.id} is recovering ${answer.recovering.length} partitions`
    const owners = ownersOf(answer)
    for (const owner of owners.values()) if (!ids.has(owner)) return `${member.id} sees ${owner} (not running) holding partitions`
    const share = Math.ceil(answer.partitions / live.length)
    const most = Math.max(...answer.nodes.map(node => node.partitions.length))
    if (most > share) return `${member.id} sees a node holding ${most} partitions (share ${share})`
    const mine = [...owners].filter(([, owner]) => owner === member.id).map(([partition]) => partition).sort((a, b) => a - b)
    if (JSON.stringify(mine) !== JSON.stringify(answer.owned)) return `${member.id} holds ${mine.length} leases but owns ${answer.owned.length}`
    const view = JSON.stringify([...owners].sort((a, b) => a[0] - b[0]))
    if (reference === null) reference = view
    else if (view !== reference) return `${member.id} sees other lease holders than ${live[0]!.id}`
  }
  return null
}

/** `count` new visitor ids of the account whose partitions `member` owns, in `owners` (as `settled()` answers it). */
export function visitorsOwnedBy (owners: ReadonlyMap<number, string>, account: string, member: string, count: number): string[] {
  const out: string[] = []
  while (out.length < count) {
    const id = randomUUID()
    if (owners.get(partitionOf(account, id, CLUSTER_PARTITIONS)) === member) out.push(id)
  }
  return out
}
