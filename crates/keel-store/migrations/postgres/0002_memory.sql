-- PLACEHOLDER (being written by the memory helper).
SELECT 1;
