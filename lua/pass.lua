-- Pass a wake-up on: a client that was woken for a lock (its wake code came, see wake.lua)
-- has no waiter for it any more (they gave up or took the lock meanwhile), so the next
-- registered client is woken instead, or, with none, every client's waiter once.
-- KEYS[1] the lock's wake registry
-- KEYS[2] the lock's channel
-- ARGV[1] the message to publish after the code ("0")
-- ARGV[2] the publish command
-- Returns 1.
wake(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
return 1
