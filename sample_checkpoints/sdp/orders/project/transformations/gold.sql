CREATE STREAMING TABLE gold USING parquet AS
SELECT customer, window(ts, '5 minutes') AS w, count(*) AS orders, sum(amount) AS total
FROM STREAM silver WATERMARK ts DELAY OF INTERVAL 5 MINUTES
GROUP BY customer, window(ts, '5 minutes');
