// One cluster lease node for the tests (in the test process or a child): its own NATS connection, the
// lease table, the members heartbeat and a balancer wired to them, on the test buckets. Not started:
// the caller calls balancer.start().

import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Balancer, type BalancerOptions } from '../../src/cluster/balancer.js'
import { LeaseTable } from '../../src/cluster/leases.js'
import { Members } from '../../src/cluster/members.js'

export interface LeaseNode {
  nc: NatsConnection
  table: LeaseTable
  balancer: Balancer
}

export interface LeaseNodeOptions extends Pick<BalancerOptions, 'onAcquired' | 'onLost' | 'onReleasing' | 'timers' | 'clock' | 'handoverLimitMs'> {
  urls: string[]
  id: string
  leaseMs: number
  partitions: number
}

export async function openLeaseNode (options: LeaseNodeOptions): Promise<LeaseNode> {
  const { urls, id, leaseMs, partitions, ...callbacks } = options
  const nc = await connect({ servers: urls, reconnectTimeWait: 100, maxReconnectAttempts: -1 })
  const table = await LeaseTable.open({ nc, bucket: 'BEACON_LEASES_test', leaseMs, replicas: 3, node: id })
  let balancer: Balancer | null = null
  const members = await Members.open({ nc, bucket: 'BEACON_NODES_test', ttlMs: leaseMs, replicas: 3, node: id, clock: options.clock, onChange: () => balancer?.tickSoon() })
  balancer = new Balancer({ table, members, partitions, ...callbacks })
  return { nc, table, balancer }
}
