-- old server: the application's tables, by name
CREATE PUBLICATION migration FOR TABLE orders;
