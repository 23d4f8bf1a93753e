-- NYC TLC green taxi trip records: the columns of one monthly Parquet file, before
-- and after the 2025 change. Names and order follow the TLC's published data
-- dictionary for green trips; from the January 2025 file on, the records carry one
-- more column, cbd_congestion_fee (the Congestion Relief Zone charge).
--
-- The physical types are this project's reading, not the TLC's word: the dictionary
-- describes meanings, not Parquet types, and the files have changed types between
-- years before. Before trusting them, re-read both lists from the real files:
--     python scripts/fetch_tlc.py --describe
-- which runs DESCRIBE on each downloaded month (scripts/fetch_tlc.py, docs/data.md).

CREATE TABLE green_trips_2024 (
    VendorID INTEGER,
    lpep_pickup_datetime TIMESTAMP,
    lpep_dropoff_datetime TIMESTAMP,
    store_and_fwd_flag VARCHAR,
    RatecodeID BIGINT,
    PULocationID INTEGER,
    DOLocationID INTEGER,
    passenger_count BIGINT,
    trip_distance DOUBLE,
    fare_amount DOUBLE,
    extra DOUBLE,
    mta_tax DOUBLE,
    tip_amount DOUBLE,
    tolls_amount DOUBLE,
    ehail_fee DOUBLE,
    improvement_surcharge DOUBLE,
    total_amount DOUBLE,
    payment_type BIGINT,
    trip_type BIGINT,
    congestion_surcharge DOUBLE
);

CREATE TABLE green_trips_2025 (
    VendorID INTEGER,
    lpep_pickup_datetime TIMESTAMP,
    lpep_dropoff_datetime TIMESTAMP,
    store_and_fwd_flag VARCHAR,
    RatecodeID BIGINT,
    PULocationID INTEGER,
    DOLocationID INTEGER,
    passenger_count BIGINT,
    trip_distance DOUBLE,
    fare_amount DOUBLE,
    extra DOUBLE,
    mta_tax DOUBLE,
    tip_amount DOUBLE,
    tolls_amount DOUBLE,
    ehail_fee DOUBLE,
    improvement_surcharge DOUBLE,
    total_amount DOUBLE,
    payment_type BIGINT,
    trip_type BIGINT,
    congestion_surcharge DOUBLE,
    cbd_congestion_fee DOUBLE
);
