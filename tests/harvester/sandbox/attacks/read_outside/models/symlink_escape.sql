-- attack: a file inside the workspace that is a symlink to a host file (created by the test)
select * from read_csv('escape.csv')
