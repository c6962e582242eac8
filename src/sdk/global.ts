// The classic-script build: `<script src=".../sdk/beacon.js">` defines the global `Beacon`.

import { Beacon } from './beacon.js'

;(globalThis as unknown as { Beacon: typeof Beacon }).Beacon = Beacon
