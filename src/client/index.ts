// beacon/client: the Node client of Beacon's HTTP API (docs/client.md).

export { BeaconClient, type WriteOptions } from './client.js'
export type { AdminApi } from './admin.js'
export type { ClientOptions } from './options.js'
export type { AttemptInfo } from './call.js'
export { BeaconError, BeaconConnectionError, InvalidArgumentError, type ErrorItem, type ConnectionCode } from './errors.js'
export { partitionOf } from '../cluster/partition.js'
export type * from './types.js'
