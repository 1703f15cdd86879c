CREATE TABLE ddl_:client_id (a int);
ALTER TABLE ddl_:client_id ADD COLUMN b int;
DROP TABLE ddl_:client_id;
