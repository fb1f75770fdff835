<?php

use Illuminate\Support\Facades\Schedule;

// Laravel 11 and later: the schedule in routes/console.php
Schedule::command('sitemap:generate')->everyOddHour()->sundays();
Schedule::command('reminders:send')->days([Schedule::MONDAY, Schedule::THURSDAY])->at('9:15');
Schedule::command('archive:run')->yearlyOn(6, 1, '17:00');
