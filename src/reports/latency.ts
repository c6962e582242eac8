// Delivery latencies per report bucket as a histogram of exponentially growing ranges (each 25 %
// wider than the one before, from 1 ms to about 70 s, then one for everything slower): fixed size,
// mergeable by addition, and percentiles within one range's width (±12 %).

export const LATENCY_BUCKETS = 52
const GROWTH = 1.25
const LOG_GROWTH = Math.log(GROWTH)

export function latencyBucket (ms: number): number {
  if (!(ms > 1)) return 0
  return Math.min(LATENCY_BUCKETS - 1, Math.ceil(Math.log(ms) / LOG_GROWTH))
}

/** The upper bound of a bucket in ms (what a percentile falling in it reports). */
export function bucketUpperMs (bucket: number): number {
  return Math.round(GROWTH ** bucket)
}

/** The p-th percentile (0 < p < 1) of the histogram, or null when it is empty. */
export function percentile (histogram: readonly number[], p: number): number | null {
  let total = 0
  for (const n of histogram) total += n
  if (total === 0) return null
  const rank = Math.ceil(p * total)
  let seen = 0
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i]!
    if (seen >= rank) return bucketUpperMs(i)
  }
  return bucketUpperMs(histogram.length - 1)
}
