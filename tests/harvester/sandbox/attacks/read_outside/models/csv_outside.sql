-- attack: read a host file outside the workspace with DuckDB's CSV reader
select * from read_csv('{{ var("outside") }}/secret.csv')
