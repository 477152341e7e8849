-- One database per service (DESIGN §1). The postgres image runs this once, when its data volume
-- is empty; `docker compose -f deploy/compose.yaml down -v` starts over.
CREATE DATABASE latchkey_auth;
CREATE DATABASE latchkey_teams;
CREATE DATABASE latchkey_contacts;
CREATE DATABASE latchkey_webhooks;
