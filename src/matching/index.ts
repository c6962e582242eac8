// The matching library's public surface: validate definitions on write, compile them into an
// immutable CampaignSet on change, match events against it, and apply frequency caps.

export type {
  AllCondition, AnyCondition, CampaignDef, CampaignInput, CampaignSet, CapPeriod, Condition,
  Allocation, Experiment, ExperimentVariant, FrequencyCap, GoalDef, GoalMetric, ImpressionHistory, VariantDef, LeafCondition, MatchContext, MatchedCampaign, NotCondition,
  Op, Predicate, Scalar, Trigger, VisitorMetrics,
} from './types.js'
export { ALLOCATIONS, CAP_PERIODS, GOAL_METRICS, OPS } from './types.js'
export { assertCampaign, validateCampaign, CAP_MAX, CONTENT_SIZE_MAX_BYTES, GOAL_WINDOW_DAYS_MAX, GOALS_MAX, NAME_LENGTH_MAX, SALT_LENGTH_MAX, TRIGGER_VALUES_MAX, VARIANT_ID_LENGTH_MAX, VARIANTS_MAX } from './validate-campaign.js'
export { validateCondition, DEPTH_MAX, LEAVES_MAX, LIST_VALUES_MAX } from './validate-condition.js'
export { compileCondition } from './compile-condition.js'
export { compileCampaigns, compileCampaignsSliced, type BanditWeights } from './compile-campaigns.js'
export { assignVariant, bucketOf, compileExperiment, inHoldout, seedOf, variantById } from './experiment.js'
export { explainCampaign, type Check, type Explanation } from './explain.js'
export { CAP_WINDOW_MS, isCapped, recordImpression } from './caps.js'
export { GLOB_LENGTH_MAX } from './glob.js'
