import { Injectable } from '@nestjs/common';

/**
 * Whether the process has begun its graceful shutdown. While draining, readiness fails so that a
 * load balancer stops sending traffic, and responses close their connection so that keep-alive
 * clients reconnect to another instance instead of holding this one open.
 */
@Injectable()
export class DrainState {
  private startedAt: number | undefined;

  begin(): void {
    this.startedAt ??= Date.now();
  }

  get draining(): boolean {
    return this.startedAt !== undefined;
  }
}
