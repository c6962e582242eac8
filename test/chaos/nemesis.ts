// The chaos run's nemesis: one fault at a time, chosen by the seeded random source, with a quiet spell
// between faults, until its deadline. Each step is recorded in the history (`nemesis` entries):
// - kill-node: SIGKILL of a Beacon node, restarted on its data folder 1–4 s later;
// - pause-node: SIGSTOP of a node for two lease times and up to 3 s more (its leases lapse and are
//   taken over), then SIGCONT: a zombie that wakes up believing it owns partitions;
// - kill-nats: SIGKILL of a NATS server (the changelog stream's leader one time in two), restarted
//   2–5 s later;
// - rolling-restart: SIGTERM of each node in turn, each restarted and joined before the next.
// heal() undoes whatever a fault left undone (a node paused or down, a NATS server down) when the run
// stops, Ctrl-C included.
//
// A node that exits by itself (a crash) is restarted at once, as a supervisor (systemd, Kubernetes) would,
// so the run goes on testing three nodes; the crash is recorded as a failed health entry (check 5: every
// node must answer), with the end of its output. So is a node that exits with a code other than 0 after
// SIGTERM.

import { connect } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { changelogStreamName } from '../../src/cluster/changelog.js'
import { admin, type BeaconProcess } from '../helpers/beacon.js'
import type { BeaconCluster } from '../helpers/beacon-cluster.js'
import { pauseProcess } from '../helpers/pause.js'
import type { History } from './history.js'
import type { Rng } from './rng.js'
import { sleep } from './clients.js'

export const FAULTS = ['kill-node', 'pause-node', 'kill-nats', 'rolling-restart'] as const
export type Fault = typeof FAULTS[number]

const RESTART_TRIES = 5

export class Nemesis {
  private readonly paused = new Set<number>()
  /** Nodes this nemesis is killing or stopping (their exit is no crash). */
  private readonly ending = new Set<number>()
  private readonly restarts = new Set<Promise<void>>()
  private watcher: NodeJS.Timeout | null = null
  private readonly logs = new Map<string, string>()
  private stopping = false
  private done: Promise<void> = Promise.resolve()
  /** Faults made, by kind. */
  readonly counts: Record<Fault, number> = { 'kill-node': 0, 'pause-node': 0, 'kill-nats': 0, 'rolling-restart': 0 }

  /** `faults`: the kinds this nemesis picks from (all by default; `--faults` narrows a run to some). */
  constructor (private readonly cluster: BeaconCluster, private readonly history: History, private readonly rng: Rng, private readonly leaseMs: number,
    private readonly faults: readonly Fault[] = FAULTS) {}

  start (deadlineMs: number): void {
    this.watcher = setInterval(() => this.watch(), 250)
    this.done = (async () => {
      while (!this.stopping && Date.now() < deadlineMs) {
        await this.sleep(this.rng.int(2000, 6000))
        if (this.stopping || Date.now() >= deadlineMs) break
        const fault = this.rng.pick(this.faults)
        this.counts[fault]++
        try {
          await this[fault === 'kill-node' ? 'killNode' : fault === 'pause-node' ? 'pauseNode' : fault === 'kill-nats' ? 'killNats' : 'rollingRestart']()
        } catch (error) {
          this.record('error', fault, String((error as Error).stack ?? error).slice(0, 2000))
        }
      }
    })()
  }

  /** Resolves once the loop ended by itself (its deadline passed and the fault under way ended). */
  finished (): Promise<void> {
    return this.done
  }

  /** What the node's earlier processes (killed or stopped by this nemesis) logged. */
  logsOf (id: string): string {
    return this.logs.get(id) ?? ''
  }

  /** Ends the current fault's waits early and resolves once the loop ended. */
  async stop (): Promise<void> {
    this.stopping = true
    await this.done
  }

  /** Every paused node continued, every stopped node and NATS server started again; crashes no longer watched. */
  async heal (): Promise<void> {
    this.unwatch()
    this.watch()
    await Promise.all(this.restarts)
    for (const index of this.paused) this.resume(index)
    for (const [index, server] of this.cluster.nats.servers.entries()) {
      if (!server.running) {
        this.record('restart-nats', this.cluster.nats.names[index]!)
        await server.restart()
      }
    }
    await this.cluster.nats.waitForQuorum(60_000).catch((error: Error) => this.record('error', 'quorum', error.message))
    for (const [index, member] of this.cluster.members.entries()) if (member.process === null) await this.restartNode(index)
  }

  private async killNode (): Promise<void> {
    const index = this.runningNode()
    if (index === null) return
    this.record('kill-node', this.cluster.members[index]!.id)
    const process = this.cluster.members[index]!.process
    this.ending.add(index)
    await this.cluster.kill(index).finally(() => this.ending.delete(index))
    this.keepLog(index, process, 'SIGKILL')
    await this.sleep(this.rng.int(1000, 4000))
    await this.restartNode(index)
  }

  private async pauseNode (): Promise<void> {
    const index = this.runningNode()
    if (index === null) return
    const member = this.cluster.members[index]!
    this.record('pause-node', member.id)
    this.paused.add(index)
    await pauseProcess(member.process!.child.pid!)
    await this.sleep(2 * this.leaseMs + this.rng.int(0, 3000))
    this.resume(index)
  }

  private resume (index: number): void {
    const member = this.cluster.members[index]!
    this.paused.delete(index)
    if (member.process === null) return
    this.record('resume-node', member.id)
    member.process.child.kill('SIGCONT')
  }

  private async killNats (): Promise<void> {
    const { nats } = this.cluster
    let index = this.rng.int(0, nats.servers.length - 1)
    let which = 'a random server'
    if (this.rng.next() < 0.5) {
      const leader = await this.changelogLeader()
      if (leader !== null) {
        index = leader
        which = 'the changelog stream\'s leader'
      }
    }
    const server = nats.servers[index]!
    this.record('kill-nats', nats.names[index]!, which)
    await server.kill()
    await this.sleep(this.rng.int(2000, 5000))
    this.record('restart-nats', nats.names[index]!)
    await server.restart()
    await nats.waitForQuorum(60_000).catch((error: Error) => this.record('error', 'quorum', error.message))
  }

  private async rollingRestart (): Promise<void> {
    this.record('rolling-restart', 'all nodes')
    for (const [index, member] of this.cluster.members.entries()) {
      if (member.process === null) continue
      this.record('stop-node', member.id, 'SIGTERM')
      // A node that has not exited 30 s after SIGTERM is killed (recorded: a stuck drain is a finding).
      const process = member.process
      const child = process.child
      const stuck = setTimeout(() => {
        this.record('stop-stuck', member.id, 'no exit 30 s after SIGTERM: SIGKILL')
        child.kill('SIGKILL')
      }, 30_000)
      this.ending.add(index)
      const code = await this.cluster.stop(index).finally(() => {
        clearTimeout(stuck)
        this.ending.delete(index)
      })
      this.keepLog(index, process, `SIGTERM, exit code ${String(code)}`)
      if (code !== 0) {
        await closed(process)
        this.unhealthy(member.id, `exited with code ${String(code)} after SIGTERM (0 expected): ${tail(process.output())}`)
      }
      this.record('stopped-node', member.id, `exit code ${String(code)}`)
      await this.restartNode(index)
      await this.joined(index)
      if (this.stopping) return
    }
  }

  /** Starts a stopped node again, tried a few times (a start can fail while NATS elects leaders). */
  private async restartNode (index: number): Promise<void> {
    const member = this.cluster.members[index]!
    for (let attempt = 1; attempt <= RESTART_TRIES; attempt++) {
      this.record('restart-node', member.id, `attempt ${attempt}`)
      try {
        await this.cluster.restart(index)
        this.record('started-node', member.id)
        return
      } catch (error) {
        this.record('restart-failed', member.id, String((error as Error).message).slice(-1500))
        await sleep(1000)
      }
    }
  }

  /** Until the node says it joined (30 s at most: check 5 judges the end state, not this). */
  private async joined (index: number): Promise<void> {
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline) {
      const member = this.cluster.members[index]!
      if (member.process === null) return
      const answer = await admin(member.url, 'GET', '/admin/cluster').catch(() => null)
      if (answer?.status === 200 && answer.body.joined === true) return
      await sleep(200)
    }
  }

  /** No more crash watching (before the run closes the cluster, whose exits are no crashes). */
  unwatch (): void {
    if (this.watcher !== null) clearInterval(this.watcher)
    this.watcher = null
    this.stopping = true
  }

  /** Nodes that exited by themselves: recorded, and started again. */
  private watch (): void {
    for (const [index, member] of this.cluster.members.entries()) {
      const process = member.process
      if (process === null || this.ending.has(index)) continue
      const { exitCode, signalCode } = process.child
      if (exitCode === null && signalCode === null) continue
      member.process = null
      this.paused.delete(index)
      const how = String(signalCode ?? exitCode)
      const at = this.history.now()
      this.record('crashed', member.id, `exit ${how}`)
      const restarting = this.watcher !== null
      // Its last output (the crash's stack on stderr) may still be in the pipes when 'exit' fires.
      const handled = closed(process).then(async () => {
        this.keepLog(index, process, `itself (${how})`)
        this.unhealthy(member.id, `exited by itself (${how}) at ${at} ms: ${tail(process.output())}`)
        if (restarting) await this.restartNode(index)
      }).finally(() => this.restarts.delete(handled))
      this.restarts.add(handled)
    }
  }

  private unhealthy (node: string, detail: string): void {
    this.history.add({ type: 'health', time: this.history.now(), node, ok: false, detail })
  }

  private keepLog (index: number, process: BeaconProcess | null, how: string): void {
    const member = this.cluster.members[index]!
    this.logs.set(member.id, this.logsOf(member.id) + (process?.output() ?? '') + `\n=== ${member.id} ended by ${how} at ${this.history.now()} ms ===\n`)
  }

  private runningNode (): number | null {
    const running = this.cluster.members.flatMap((member, index) => member.process === null ? [] : [index])
    return running.length === 0 ? null : this.rng.pick(running)
  }

  private async changelogLeader (): Promise<number | null> {
    const nc = await connect({ servers: this.cluster.nats.urls, timeout: 2000 })
    try {
      const jsm = await jetstreamManager(nc, { timeout: 2000 })
      const info = await jsm.streams.info(changelogStreamName(this.cluster.name))
      const index = this.cluster.nats.names.indexOf(info.cluster?.leader ?? '')
      return index < 0 ? null : index
    } catch {
      return null
    } finally {
      await nc.close()
    }
  }

  /** A wait the stop cuts short. */
  private async sleep (ms: number): Promise<void> {
    const until = Date.now() + ms
    while (!this.stopping && Date.now() < until) await sleep(Math.min(100, until - Date.now()))
  }

  private record (action: string, target: string, detail?: string): void {
    this.history.add({ type: 'nemesis', time: this.history.now(), action, target, ...(detail === undefined ? {} : { detail }) })
  }
}

/**
 * The end of a process's output, for a health entry: what it wrote besides its JSON log lines (a crash's
 * stack, on stderr), else its last log lines.
 */
function tail (output: string): string {
  const lines = output.split('\n')
  const plain = lines.filter(line => line !== '' && !line.startsWith('{')).join('\n')
  return (plain !== '' ? plain : lines.slice(-5).join('\n')).slice(-2500)
}

/** Resolves once the process's output pipes are closed (1 s at most). */
function closed (process: BeaconProcess): Promise<void> {
  const { child } = process
  if (child.stdout?.closed === true && child.stderr?.closed === true) return Promise.resolve()
  return new Promise(resolve => {
    const timer = setTimeout(resolve, 1000)
    child.once('close', () => { clearTimeout(timer); resolve() })
  })
}
