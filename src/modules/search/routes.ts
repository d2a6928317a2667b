import { Elysia } from 'elysia'
import { authGuard } from '../auth/guard'
import type { AuthRuntime } from '../auth/runtime'
import { models } from '../../shared/models-plugin'

export function searchRoutes(auth: AuthRuntime) {
  return new Elysia({ name: 'search-routes' }).use(models).use(authGuard(auth))
}
