import { CLUSTER_ERRORS, ClusterError } from '../../src/cluster/errors.js'

/**
 * Runs a read of a partition's changelog again (up to 5 times) when it was refused with
 * CLUSTER_CHANGELOG_UNAVAILABLE, as a node's recovery does (src/cluster/changelog.ts, `read`): a read
 * that came up short (a snapshot's purge ran during it) or stalled (a fetch got nothing for 5 s, seen
 * once in CI on Node 24 right after the stream leader's server was killed and restarted).
 */
export async function againIfRefused<T> (read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read()
    } catch (error) {
      if (!(error instanceof ClusterError) || error.code !== CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE || attempt === 5) throw error
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  }
}
