/** docs/adr/0006-api-keys.md: the fixed live prefix. Here so the logger can redact keys without importing auth. */
export const API_KEY_PREFIX = 'tcg_live_'
