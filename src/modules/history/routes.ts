import { Elysia } from 'elysia'
import { authGuard } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { models } from '../../shared/models-plugin'

export function historyRoutes(auth: AuthRuntime) {
  return new Elysia({ name: 'history-routes' }).use(models).use(authGuard(auth))
}
