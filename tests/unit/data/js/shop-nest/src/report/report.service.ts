import { Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression, Interval, Timeout } from '@nestjs/schedule';

const EVERY = process.env.EVERY ?? '0 * * * *';

@Injectable()
export class ReportService {
  private readonly logger = new Logger(ReportService.name);

  @Cron(CronExpression.EVERY_DAY_AT_5PM, { name: 'daily-report', timeZone: 'Europe/Berlin' })
  async sendDailyReport(): Promise<void> {
    this.logger.log('report');
  }

  @Cron('0 30 2 * * 1-5', { timeZone: 'Europe/Berlin' })
  async purgeSessions(): Promise<void> {}

  @Cron(CronExpression.EVERY_30_SECONDS)
  poll(): void {}

  @Cron(EVERY)
  dynamic(): void {}

  @Cron('0 0 9 * * *', { utcOffset: 2 })
  offset(): void {}

  @Interval(60_000)
  refreshCache(): void {}

  @Timeout('warm-up', 5000)
  warmUp(): void {}
}
