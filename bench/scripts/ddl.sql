CREATE TABLE public.ddl_:client_id (a int);
ALTER TABLE public.ddl_:client_id ADD COLUMN b int;
DROP TABLE public.ddl_:client_id;
