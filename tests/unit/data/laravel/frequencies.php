<?php
// The expression Laravel's own ManagesFrequencies writes for each chain read from stdin (a JSON list of chains
// such as "weeklyOn([1, 3], '8:30')"), as a JSON list; null where this Laravel has no such method.
// Run by tests/unit/test_phpsource.py with Debian's php-laravel-framework (make php-tools).
require '/usr/share/php/Illuminate/Console/autoload.php';

class Frequencies
{
    use Illuminate\Console\Scheduling\ManagesFrequencies;

    public $expression = '* * * * *';
    public $timezone;
}

$written = [];
foreach (json_decode(file_get_contents('php://stdin'), true) as $chain) {
    $event = new Frequencies();
    try {
        eval('$event->' . $chain . ';');
        $written[] = $event->expression;
    } catch (\Throwable $error) {
        $written[] = null;
    }
}
echo json_encode($written);
