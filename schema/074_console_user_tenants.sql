-- 074_console_user_tenants.sql: console users scoped to tenants.
--
-- A console user saw every tenant's runs. `runledger users add NAME
-- --tenants T1,T2` stores the tenants a user may read; every page, list
-- and report of the console then reads only those (the queries take the
-- signed-in user's name and check it), and a run of another tenant is
-- not found. NULL: every tenant, as before.
ALTER TABLE console_users ADD COLUMN tenants text[];
