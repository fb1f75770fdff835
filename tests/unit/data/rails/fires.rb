# The fires Fugit itself computes, for tests/unit/test_rbsource.py: reads [{schedule, start, end}] (the schedule
# as Solid Queue or sidekiq-cron would get it, a zone after it; times in epoch seconds) as JSON on stdin, prints
# [{cron, fires}] (Fugit's own cron line, null when it reads no schedule, and the fire times in epoch seconds).
require "json"
require "fugit"

asks = JSON.parse($stdin.read)
answers = asks.map do |ask|
  cron = Fugit.parse(ask["schedule"])
  next { "cron" => nil, "fires" => [] } unless cron.is_a?(Fugit::Cron) # not a schedule to Fugit
  fires = []
  at = EtOrbi::EoTime.new(ask["start"], "UTC")
  loop do
    at = cron.next_time(at)
    break if at.to_i > ask["end"] || fires.size > 200_000
    fires << at.to_i
  end
  { "cron" => cron.to_cron_s, "fires" => fires }
end
$stdout.write(JSON.generate(answers))
