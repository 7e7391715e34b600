import { AppIdParam } from '@app/common/reads/query-params';

/** The query of the plan endpoints: the app only. */
export class AppQueryDto {
  @AppIdParam()
  appId!: string;
}
