-- attack: read a remote file by URL
select * from read_csv('http://127.0.0.1:{{ var("port") }}/data.csv')
