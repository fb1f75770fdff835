<?php

namespace App\Console;

use App\Jobs\Heartbeat;
use App\Jobs\Reports\WeeklyRevenue as Revenue;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Foundation\Console\Kernel as ConsoleKernel;
use Illuminate\Support\Facades\DB;

class Kernel extends ConsoleKernel
{
    /**
     * A shop's scheduled tasks, in the forms Laravel's documentation shows (Laravel 10's console kernel).
     */
    protected function schedule(Schedule $schedule): void
    {
        $schedule->command('emails:send Taylor --force')->dailyAt('13:00')->timezone('America/New_York');
        $schedule->command('report:weekly', ['--format=pdf'])->weeklyOn(1, '8:00')->withoutOverlapping();
        $schedule->job(new Heartbeat)->everyFiveMinutes();
        $schedule->job(Revenue::class)->mondays()->at('07:30')->timezone('Europe/Berlin');
        $schedule->exec('node /home/forge/script.js')->twiceDaily(1, 13);
        $schedule->command('backup:run')->cron('30 2 * * *')->onOneServer()->timezone('Europe/Berlin');
        $schedule->command('cache:prune')->everyTwoHours(15)->weekdays();
        $schedule->command('invoices:close')->monthlyOn(4, '15:00');
        $schedule->command('stats:quarter')->quarterly();
        $schedule->command('telescope:prune')->daily()->environments(['production']);
        $schedule->call(function () {
            DB::table('recent_users')->delete();
        })->daily();
        $schedule->command('inspire')->hourly()->between('7:00', '22:00');
        $schedule->command('queue:monitor')->everyTenSeconds();
        $schedule->command('ledger:close')->lastDayOfMonth('23:00');
        $schedule->command(SendEmails::class, ['Taylor'])->daily();
        $schedule->command(config('app.nightly_command'))->daily();
    }
}
