// Who owns which partition, as the request path asks it (cluster mode). The cluster node
// answers from its balancer and its view of the lease bucket; forwarding, the entity changelog and the
// admin views read it through this interface only.

export interface Ownership {
  readonly nodeId: string
  readonly partitions: number
  /** The partition of an entity key (partitionOf of src/cluster/partition.ts with this cluster's P). */
  partitionOf (account: string, id: string): number
  /** This node holds the partition's lease and has recovered it: it may serve and write the partition now. */
  owns (partition: number): boolean
  /** The node holding the partition's lease as this node last saw the lease bucket, or null while none does. */
  ownerOf (partition: number): string | null
  /**
   * Resolves with the owner once the partition has one that is not `notNode` (a node that just said it
   * no longer owns it), or null when timeoutMs passes first.
   */
  ownerReady (partition: number, timeoutMs: number, notNode?: string): Promise<string | null>
}
