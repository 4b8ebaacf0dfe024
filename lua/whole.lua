-- Prepended by package script to the scripts that name its value, before the functions of
-- the other preludes. KEYS, ARGV: none of its own.
--
-- most_whole is 2^53-1, the largest whole number a script keeps exactly: Lua's numbers are
-- doubles. Past it a count is no longer exact, so the counting kinds refuse it (count.lua's
-- within), and an expiry reaches PEXPIRE written as a float ("4.0000000000000010e+18"),
-- which PEXPIRE refuses after the script may have written: an expiry a script computes
-- from data it did not write (another client's lease, a waiter's deadline) is cut to it.
local most_whole = 9007199254740991
