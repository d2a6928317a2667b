import { Elysia } from 'elysia'
import { ErrorBody } from './model'

/** Schemas every module refers to by name, so OpenAPI shows them once under components. */
export const models = new Elysia({ name: 'shared-models' }).model({ Error: ErrorBody })
