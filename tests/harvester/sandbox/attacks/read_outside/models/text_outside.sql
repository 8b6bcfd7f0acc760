-- attack: slurp a host file as text
select content from read_text('{{ var("outside") }}/secret.txt')
