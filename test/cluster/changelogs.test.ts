// A cluster's partitions spread over several changelog streams (src/cluster/changelogs.ts): the layout
// (stream 0 as a one-stream cluster's, stream i ≥ 1 with subjects `….s<i>.<p>`, partition p in stream
// p mod S), writes and recovery through the entity log across the streams, leaders spread over the
// servers, and the number a cluster keeps (cluster-meta.ts). On a 3-server NATS cluster, R3.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { ApiError } from '../../src/errors.js'
import { Changelog } from '../../src/cluster/changelog.js'
import { changelogExists, changelogStream, spreadLeaders } from '../../src/cluster/changelogs.js'
import { settleChangelogStreams } from '../../src/cluster/cluster-meta.js'
import type { VisitorState } from '../../actors/visitor.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { idsIn, PARTITIONS, startEntityNode, type EntityNode } from '../helpers/entity-node.js'

const ACCOUNT = 'acme'

describe('changelog streams: a cluster\'s partitions spread over several streams (R3, 3-server NATS)', function () {
  this.timeout(120_000)
  let cluster: NatsCluster
  let nc: NatsConnection
  let nodes: EntityNode[] = []

  before(async () => {
    cluster = await startNatsCluster()
    nc = await connect({ servers: cluster.urls })
  })
  after(async () => {
    await nc?.close()
    await cluster?.close()
  })
  afterEach(async () => {
    for (const node of nodes) await node.close()
    nodes = []
  })

  async function node (id: string, name: string, streams: number): Promise<EntityNode> {
    const started = await startEntityNode(id, { servers: cluster.urls, cluster: name, streams })
    nodes.push(started)
    return started
  }

  async function stateOf (n: EntityNode, id: string): Promise<VisitorState> {
    return await n.runtime.send(n.visitors, ACCOUNT, id, { type: 'snapshot' })
  }

  it('keeps partition p in stream p mod S, stream 0 with the one-stream layout (name and subjects)', async () => {
    const a = await node('a', 'split1', 3)
    const jsm = await jetstreamManager(nc)
    const subjects: string[][] = []
    for (let i = 0; i < 3; i++) subjects.push((await jsm.streams.info(changelogStream('split1', i).stream)).config.subjects)
    expect(changelogStream('split1', 0).stream).to.equal('BEACON_CHANGELOG_split1')
    expect(subjects).to.deep.equal([['beacon.changelog.split1.*'], ['beacon.changelog.split1.s1.*'], ['beacon.changelog.split1.s2.*']])
    for (let p = 0; p < 6; p++) await a.log.recover(p)
    for (let p = 0; p < 6; p++) {
      // The partition's claim is in its stream, and in no other.
      for (let i = 0; i < 3; i++) {
        const { stream, subjectPrefix } = changelogStream('split1', i)
        const held = (await jsm.streams.info(stream, { subjects_filter: `${subjectPrefix}.${p}` })).state.subjects?.[`${subjectPrefix}.${p}`] ?? 0
        expect(held, `partition ${p} in stream ${i}`).to.equal(i === p % 3 ? 1 : 0)
      }
    }
  })

  it('writes through the entity log to every stream, and another node recovers every partition exactly; the old owner is fenced per partition', async () => {
    const a = await node('a', 'split2', 3)
    const b = await node('b', 'split2', 3)
    for (let p = 0; p < PARTITIONS; p++) await a.log.recover(p)
    const ids = Array.from({ length: PARTITIONS }, (_, p) => idsIn(a.log, ACCOUNT, p, 3)).flat()
    for (const id of ids) {
      await a.event(ACCOUNT, id, { event: 'purchase', orderId: `o-${id}`, orderTotal: 2 })
      await a.event(ACCOUNT, id, { event: 'pageView', path: `/p/${id}` })
    }
    for (let p = 0; p < PARTITIONS; p++) await b.log.recover(p)
    for (const id of ids) {
      const state = await stateOf(b, id)
      expect(state.purchases, id).to.equal(1)
      expect(state).to.deep.equal(await stateOf(a, id))
    }
    const refused = await a.event(ACCOUNT, ids[0]!, { event: 'pageView' }).then(() => null, (error: unknown) => error)
    expect((refused as ApiError).items[0]!.code).to.equal('partition_moved')
    expect(a.refused.map(([partition]) => partition)).to.deep.equal([a.log.partitionOfKey(ACCOUNT, ids[0]!)])
  })

  it('spreads the streams\' leaders over the three servers', async () => {
    await node('a', 'split3', 3)
    const names = [0, 1, 2].map(i => changelogStream('split3', i).stream)
    const leaders = await spreadLeaders(nc, names, 3)
    expect(new Set(leaders).size, leaders.join(', ')).to.equal(3)
  })

  it('keeps the number a cluster recorded first, and one stream for a cluster whose changelog predates the record', async () => {
    const settle = (name: string, wanted: number): Promise<number> => settleChangelogStreams(nc, name, wanted, () => changelogExists(nc, name), 3)
    expect(await settle('meta1', 3)).to.equal(3)
    expect(await settle('meta1', 1)).to.equal(3)
    // Created by a release without the setting: its stream 0 exists, the cluster has no record.
    await Changelog.open({ nc, owner: 'old', replicas: 3, ...changelogStream('meta2', 0) })
    expect(await settle('meta2', 4)).to.equal(1)
    expect(await settle('meta2', 4)).to.equal(1)
  })
})
