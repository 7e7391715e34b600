import { Injectable } from '@nestjs/common';

export interface ComputeOptions {
  appId?: string;
  /** First UTC day, YYYY-MM-DD. */
  from?: string;
  /** Last UTC day, YYYY-MM-DD. */
  to?: string;
}

@Injectable()
export class RollupsService {
  /** Recomputes the rollups of a range on demand (the CLI). */
  async compute(_options: ComputeOptions): Promise<{ days: number; rows: number }> {
    return { days: 0, rows: 0 };
  }
}
