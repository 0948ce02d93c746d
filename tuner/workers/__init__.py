"""Several workers on one study: host leases, the study-wide ask gate and baseline lock, leased
targets.

Used by ``tuner.app`` on a server database (PostgreSQL); a lone tuner never imports it."""
