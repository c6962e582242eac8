// The matching library's public surface: validate definitions on write, compile them into an
// immutable CampaignSet on change, match events against it, and apply frequency caps.

export type {
  AllCondition, AnyCondition, CampaignDef, CampaignInput, CampaignSet, CapPeriod, Condition,
  FrequencyCap, ImpressionHistory, LeafCondition, MatchContext, MatchedCampaign, NotCondition,
  Op, Predicate, Scalar, Trigger, VisitorMetrics,
} from './types.js'
export { CAP_PERIODS, OPS } from './types.js'
export { assertCampaign, validateCampaign, MAX_CAP, MAX_CONTENT_BYTES, MAX_NAME_LENGTH, MAX_TRIGGER_VALUES } from './validate-campaign.js'
export { validateCondition, MAX_DEPTH, MAX_LEAVES, MAX_LIST_VALUES } from './validate-condition.js'
export { compileCondition } from './compile-condition.js'
export { compileCampaigns } from './compile-campaigns.js'
export { referenceMatch } from './reference.js'
export { explainCampaign, type Check, type Explanation } from './explain.js'
export { CAP_WINDOW_MS, isCapped, recordImpression } from './caps.js'
export { GLOB_MAX_LENGTH } from './glob.js'
