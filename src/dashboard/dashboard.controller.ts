import { Controller, Get, Param, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { AppError } from '@app/common/app-error';
import { Asset, DashboardAssets } from './dashboard-assets';

/**
 * GET /dashboard and its assets. The page holds no data: it reads through the public API with
 * the key a person pastes, so every guard and rate limit applies to it as to any client.
 */
@ApiExcludeController()
@Controller('dashboard')
export class DashboardController {
  constructor(private readonly assets: DashboardAssets) {}

  private send(res: Response, asset: Asset | null, what: string): void {
    if (!asset) throw new AppError('not_found', `${what} does not exist. Is the dashboard built?`);
    // Small files, rebuilt in place on upgrade: revalidate every time rather than cache stale code.
    res.status(200).setHeader('Cache-Control', 'no-cache').type(asset.contentType).send(asset.body);
  }

  @Get()
  page(@Res() res: Response): void {
    this.send(res, this.assets.page, 'The dashboard page');
  }

  @Get('assets/:name')
  asset(@Param('name') name: string, @Res() res: Response): void {
    this.send(res, this.assets.asset(name), 'This dashboard asset');
  }
}
